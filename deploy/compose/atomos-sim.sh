#!/bin/sh
# The compose stack's AtomOS simulator. atomos-sim serves each host's four
# daemons on ephemeral ports and prints each host's target (name, host, ports,
# provider, region, continent) as a JSON line, then {"control": ...}. This
# turns those lines into the JSON array MESON_TARGETS_FILE reads, with the
# host the other containers dial (this compose service's name), and writes it
# to the volume the api mounts at /var/lib/meson. The api waits for it
# (healthcheck: the file exists) and registers the targets at start.
set -eu
dir=/var/lib/meson
out="$dir/atomos-sim.out"
rm -f "$dir/targets.json" "$out"
(
    until grep -q '"control"' "$out" 2>/dev/null; do sleep 0.2; done
    grep -v '"control"' "$out" \
        | sed 's/"host":"[^"]*"/"host":"atomos-sim"/' \
        | paste -s -d, - \
        | sed 's/^/[/; s/$/]/' > "$dir/targets.json.tmp"
    mv "$dir/targets.json.tmp" "$dir/targets.json"
    echo "atomos-sim targets: $(cat "$dir/targets.json")" >&2
) &
# Listen on every interface (the other containers connect); extra arguments
# (the compose command) are atomos-sim's own flags.
exec atomos-sim --bind 0.0.0.0 "$@" > "$out"
