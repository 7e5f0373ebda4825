"""Entry point of the frozen git-tune: only the CLI; everything heavy is imported lazily."""
from git_tune.cli import main

if __name__ == "__main__":
    main()
