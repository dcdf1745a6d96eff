"""Managing runs as a whole: liveness, retention (``prune``) and health (``doctor``)."""
