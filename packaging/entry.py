"""Entry point of the frozen git-tune: only the CLI; everything heavy is imported lazily.
With peak.SPAWN_FLAG first it is peakspawn instead (git's peak memory, measured from a
process that carries nothing but the interpreter)."""
import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--peak-spawn"]:
        from git_tune.advisor.measure import peakspawn
        peakspawn.main(sys.argv[2:])
    from git_tune.cli import main
    main()
