"""Deploying a new version to a running continuous job (docs/deploying.md): the pre-flight's verdict, the rollout's
request and phases. No pyspark here."""
