# Sourced by scripts/test and scripts/bench: distribution packages a run needs.

# ensure_commands CMD:PACKAGE...: installs (apt-get, as root) the package of every command not
# on PATH; returns 1 naming each command still missing on stderr.
ensure_commands() {
    local want missing=() left=0
    for want in "$@"; do
        command -v "${want%%:*}" >/dev/null || missing+=("${want#*:}")
    done
    if ((${#missing[@]})) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing ${missing[*]}" >&2
        apt-get update -qq >&2 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 || true
    fi
    for want in "$@"; do
        if ! command -v "${want%%:*}" >/dev/null; then
            echo "${want%%:*} is missing and could not be installed; install the distribution's" \
                "${want#*:} package" >&2
            left=1
        fi
    done
    return "$left"
}
