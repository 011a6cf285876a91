"""Built-in backends; each module is one backend, imported only when it is used.

They are registered through the ``sandbox_runtime.backends`` entry-point group in
``pyproject.toml``, the same way a third-party package registers its own.
"""
