#!/usr/bin/python
"""Ansible module: apply a git-tune profile, honestly changed/ok, with check and diff modes.

It runs `git-tune apply PROFILE --check --json` first (exit 0 = already
applied, 6 = would change); only then, and not in check mode, applies.
"""
import json
import os
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def main():
    module = AnsibleModule(
        argument_spec={"command": {"type": "list", "elements": "str", "default": ["git-tune"]},
                       "profile_content": {"type": "str", "required": True},
                       "scope": {"type": "str", "default": "global"},
                       "force": {"type": "bool", "default": False}},
        supports_check_mode=True)
    p = module.params
    fd, profile = tempfile.mkstemp(prefix="git-tune-profile-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(p["profile_content"])
    try:
        apply(module, p, profile)
    finally:
        os.unlink(profile)


# git-tune's exit code for a host of another class than the profile's (ProfileMismatch).
NOT_OF_THE_CLASS = 8


def apply(module, p, profile):
    base = list(p["command"]) + ["apply", profile, "--scope", p["scope"], "--json"]
    if p["force"]:
        base.append("--force")
    rc, out, err = run(base + ["--check"])
    if rc == NOT_OF_THE_CLASS:
        # A profile is for one class of host: another class keeps its own config, as the
        # README's CI recipe has it. Said, not failed: a mixed fleet's play goes on.
        module.exit_json(changed=False,
                         msg=f"not applied: this host is not of the profile's class: "
                             f"{err.strip().removeprefix('git-tune: ')}",
                         warnings=[f"git-tune apply: {err.strip()}"])
    if rc not in (0, 6):
        module.fail_json(msg=f"git-tune apply --check failed (exit {rc}): {err.strip()}", rc=rc)
    check = json.loads(out)
    plan = check["plan"]
    diff = {"before_header": f"{plan['scope']['include_file']} (now)",
            "after_header": f"{plan['scope']['include_file']} (profile)",
            "before": "".join(f"{k} = {v}\n" for k, v in sorted(plan["current"].items())),
            "after": "".join(f"{k} = {v}\n" for k, v in sorted(plan["settings"].items()))}
    if rc == 0:
        module.exit_json(changed=False, msg="already applied", diff=diff)
    if module.check_mode:
        module.exit_json(changed=True, msg="would change", diff=diff)
    rc, out, err = run(base)
    if rc != 0:
        module.fail_json(msg=f"git-tune apply failed (exit {rc}): {err.strip()}", rc=rc)
    module.exit_json(changed=True, msg=json.loads(out)["written"]["message"], diff=diff)


if __name__ == "__main__":
    main()
