"""``python -m autopilot`` runs the command line (an idle Stop hook answered first)."""

from autopilot.launch import main

if __name__ == "__main__":
    main()
