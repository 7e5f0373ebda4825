"""Where a located repository's parts are."""
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class RepoLayout:
    """Where things are: worktree and git directories can live on different file systems."""

    worktree: Optional[str]
    git_dir: str
    common_dir: str
    index_file: str
    bare: bool
    object_format: str = "sha1"      # sha256 in a repository made with --object-format=sha256

    @property
    def top(self) -> str:
        """Where git runs for the repository: its work tree, its git directory where bare."""
        return self.worktree or self.git_dir
