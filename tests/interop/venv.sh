# Sourced by run.sh and fleet.sh: the Python venv with the official SDK client, (re)installed
# only when requirements.txt changes. Reads $venv (the venv's directory), $python (the
# interpreter that creates it) and $req (the requirements file); sets $py.
prepare_venv() {
    local req_hash stamp
    req_hash="$(sha256sum "$req" | cut -c1-16)"
    stamp="$venv/.interop-requirements-$req_hash"
    if [[ ! -f "$stamp" ]]; then
        echo "interop: preparing venv $venv"
        if [[ ! -x "$venv/bin/python" ]]; then
            "$python" -m venv "$venv"
        fi
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
        rm -f "$venv"/.interop-requirements-*
        touch "$stamp"
    fi
    py="$venv/bin/python"
}
