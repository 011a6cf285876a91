"""Local emulators of the services sandbox-runtime drives, for testing without them.

* :mod:`sandbox_runtime_emulators.ags`: Tencent Cloud Agent Sandbox (the Cloud API, the
  E2B-compatible REST API and envd on one port, and the TCR actions an image push needs);
  the unmodified ``tencentcloud-sdk-python-ags`` and ``e2b`` clients work against it.
* :mod:`sandbox_runtime_emulators.kubernetes`: the subset of the Kubernetes API the
  ``kubernetes`` backend uses, over HTTPS, with every pod a Docker container; the unmodified
  ``kubernetes`` client and ``kubectl`` work against it.

Test doubles are a product of their own (as moto is beside boto3): the library's wheel holds
none of this.  ``sandbox-runtime-emulator ags|kubernetes`` (or ``sandbox-runtime ags
emulator`` / ``kubernetes emulator`` once this is installed) serves one in the foreground;
where each differs from the real service is written down in ``docs/ags-emulator.md`` and
``docs/kubernetes.md``.
"""

__version__ = "0.1.0"
