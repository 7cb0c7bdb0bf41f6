from autoresearch.cli import main

main()
