"""Tencent Cloud Agent Sandbox (AGS) support shared by the backend and the ``ags`` commands.

``control`` is the typed Cloud API client (retries, error translation, secret hygiene) and
``tcr`` its registry counterpart; ``settings`` builds both from arguments or the
environment.  ``tools`` and ``instances`` manage tools and instances, ``registry`` pushes
images to TCR/CCR, ``sync`` turns a dataset's images into tools, and ``mapping`` is the
image->tool file that sync writes and the backend reads.  ``cli`` adds the
``sandbox-runtime ags ...`` commands.  Nothing is imported here, so that
``sandbox-runtime --help`` stays fast and works without the ``ags`` extra.
"""
