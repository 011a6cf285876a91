"""The same code on any backend: ``python examples/quickstart.py [local|docker] [IMAGE]``."""

from __future__ import annotations

import sys

from sandbox_runtime import SandboxConfig, SandboxRuntime

FIX = (
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n-    return a - b\n+    return a + b\n"
)


def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "local"
    image = sys.argv[2] if len(sys.argv) > 2 else None
    if backend == "docker" and image is None:
        image = "sandbox-runtime-test/base:bookworm"
    config = SandboxConfig(
        backend=backend,
        image=image,
        workdir="/testbed",
        exec_timeout=60,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )
    add_two_and_two = ["python3", "-c", "import calc; print(calc.add(2, 2))"]
    with SandboxRuntime(config) as sandbox:
        sandbox.write_text("calc.py", "def add(a, b):\n    return a - b\n")
        sandbox.exec(
            "git init -q && git add -A && git -c user.name=a -c user.email=a@b commit -qm base"
        )
        print("before:", sandbox.exec(add_two_and_two).stdout.strip())
        print("patch applied:", sandbox.apply_patch(FIX).applied)
        print("after:", sandbox.exec(add_two_and_two).stdout.strip())
        print("diff against base:\n" + sandbox.diff())
        slow = sandbox.exec("echo working; sleep 30", timeout=1)
        print(f"timed out: {slow.timed_out}, exit {slow.exit_code}, partial output {slow.stdout!r}")


if __name__ == "__main__":
    main()
