"""Adapters between sandbox-runtime and the frameworks its users train and evaluate with.

``repoenv`` opens an R2E-Gym dataset entry the way R2E-Gym's ``RepoEnv`` does, as the
``repoenv`` backend over any engine backend.  This layer sits beside :mod:`sandbox_runtime.swe`
(whose rows, preparation and grading it uses) and above the core; nothing below imports it.
"""
