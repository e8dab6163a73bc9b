# Sourced by the scripts that build a tool once into the user's cache and
# print where it is (test-cluster.sh, s3-server.sh, python-venv.sh): their
# one optional argument, and where the cache is.

# parse_installed_flag SCRIPT [ARGUMENT]: sets `build` to 1, or to 0 for
# --installed (build nothing: print the tool when it is there and current,
# else say why not and exit 1). Any other argument exits 2.
parse_installed_flag() {
  build=1
  case "${2:-}" in
    "") ;;
    --installed) build=0 ;;
    *) echo "$1: unknown argument '$2' (usage: scripts/$1.sh [--installed])" >&2
       exit 2 ;;
  esac
}

# cache_dir NAME: ${XDG_CACHE_HOME:-$HOME/.cache}/NAME, $HOME read from the
# user database where it is unset (some CI runners and containers).
cache_dir() {
  local home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
  echo "${XDG_CACHE_HOME:-$home/.cache}/$1"
}
