from autoresearch.cli.commands import main

main()
