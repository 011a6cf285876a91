"""Tencent Cloud Agent Sandbox (AGS) support shared by the backend and the ``ags`` commands.

``control`` is the typed Cloud API client (retries, error translation, secret hygiene);
``cli`` adds the ``sandbox-runtime ags ...`` commands.  Nothing is imported here, so that
``sandbox-runtime --help`` stays fast and works without the ``ags`` extra.
"""
