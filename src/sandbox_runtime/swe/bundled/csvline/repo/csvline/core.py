"""A small splitter for one CSV row (RFC 4180 quoting, no line breaks in fields)."""


def split_row(line, delimiter=","):
    """Split ``line`` into fields; a quoted field may contain delimiters and ``""``."""
    fields = []
    field = []
    quoted = False
    i = 0
    while i < len(line):
        char = line[i]
        if quoted:
            if char == '"':
                if i + 1 < len(line) and line[i + 1] == '"':
                    field.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                field.append(char)
        elif char == '"':
            quoted = True
        elif char == delimiter:
            fields.append("".join(field))
            field = []
        else:
            field.append(char)
        i += 1
    if field:
        fields.append("".join(field))
    return fields
