"""envd, the protocol of the daemon inside E2B and AGS sandboxes, on both of its ends.

``server`` is our own envd (standard library only, relative imports), which the AGS emulator
runs in its instances and the docker and kubernetes backends start in their containers as the
in-sandbox agent of their agent path; ``client`` speaks to any envd, ours or the real one;
``commands`` runs one command through a client with the guarantees of the core's ``exec``.

Nothing is imported here, so that ``server`` stays importable without the client's httpx.
"""
