"""Text that goes into a gitconfig file, made safe whatever its source.

Everything git-tune writes into a config file comes through here: header
comments (which may carry text from an untrusted fleet profile), values,
and includeIf subsections. Git's syntax (git-config(1), config.c):

- a comment runs from `#` or `;` to the end of the line, so a newline in
  comment text would start live config: control characters are escaped;
- a value may be written in double quotes, inside which `\\`, `"` and
  newline (`\\n`) and tab (`\\t`) are escaped;
- a subsection name is quoted; inside it only `\\` and `"` are escaped and a
  newline cannot be written at all;
- a `gitdir:` condition is a wildmatch pattern: `*`, `?`, `[` and `\\` in a
  literal path must be escaped with a backslash to match only that path.
"""
import re
import unicodedata

from ...errors import UsageError


def comment(text: str) -> str:
    """One comment line's text: no character that could end the line or hide in it."""
    out = []
    for ch in str(text):
        if ch in "\n\r" or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ch.encode("unicode_escape").decode("ascii") if ch != "\n" else "\\n")
        else:
            out.append(ch)
    return "".join(out)


def value(text: str) -> str:
    """A value as git will read it back: bare when it is plain (numbers, booleans, most
    paths), otherwise in double quotes, so `#`, `;`, spaces and backslashes stay literal."""
    text = str(text)
    if "\0" in text:
        raise UsageError("a config value cannot hold a NUL byte")
    if re.fullmatch(r"[A-Za-z0-9._/+@:,=-]+", text, re.ASCII):
        return text
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"')
               .replace("\n", "\\n").replace("\t", "\\t"))
    return f'"{escaped}"'


def subsection(name: str) -> str:
    """A quoted subsection name, as in [includeIf "gitdir:/x"]."""
    if "\n" in name or "\0" in name:
        raise UsageError(f"{name!r}: a config subsection cannot hold a newline or NUL")
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gitdir_condition(git_dir: str) -> str:
    """An includeIf condition that matches exactly this git directory.

    The git dir itself, no trailing slash: "gitdir:/r/.git/" becomes
    "/r/.git/**", which does not match "/r/.git" (checked with git 2.39).
    """
    literal = "".join("\\" + c if c in "\\*?[" else c for c in git_dir.rstrip("/"))
    return f"gitdir:{literal}"
