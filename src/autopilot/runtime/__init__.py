"""Wiring with no click: messages, the OFF switch, memory, notifications, keep-awake,
the login service, the daemon and its supervisor."""
