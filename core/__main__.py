from git_tune.cli import main

main()
