"""``python -m autopilot`` runs the command line."""

from autopilot.cli.main import main

if __name__ == "__main__":
    main()
