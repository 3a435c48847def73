#!/bin/sh
# device-info.sh: describes the phone next to this worker, for
#
#   worker --device-info "examples/device-info.sh" ...
#
# It prints one JSON object (SPEC.md, "Devices"): serial, model, android
# (the release, e.g. "14"), battery (an integer 0-100), charging (true or
# false), screen ("on" or "off") and adb ("device", "offline" or
# "unauthorized"). The worker runs it at start, every minute and after
# each job, and claims nothing while adb is not "device" or the battery is
# under --min-battery (default 15) and not charging.
#
# A phone adb cannot reach is not an error: the object then says so in
# "adb" (with adb's own words in "adb_error") and leaves out what only the
# phone could tell. Only a missing adb makes it fail (exit 1).
#
# adb honours ANDROID_SERIAL when several phones are attached.
set -u

# str escapes $1 for a JSON string: backslash and quote, control
# characters dropped.
str() {
	printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

if ! command -v adb >/dev/null 2>&1; then
	echo "adb is not on PATH: install Android platform-tools on this worker" >&2
	exit 1
fi

out=$(adb get-state 2>&1 | tr -d '\r')
case $out in
device) adb=device ;;
offline) adb=offline ;;
*unauthorized*) adb=unauthorized ;;
*) adb=offline ;; # no phone attached, or a state adb cannot drive (bootloader, recovery)
esac

serial=${ANDROID_SERIAL:-}
if [ -z "$serial" ]; then
	serial=$(adb get-serialno 2>/dev/null | tr -d '\r' | tr -cd 'A-Za-z0-9._:-')
	[ "$serial" = unknown ] && serial=
fi

fields="\"adb\":$(str "$adb")"
[ -n "$serial" ] && fields="$fields,\"serial\":$(str "$serial")"
if [ "$adb" != device ]; then
	[ "$out" != "$adb" ] && fields="$fields,\"adb_error\":$(str "$(printf '%s' "$out" | head -n 1)")"
	printf '{%s}\n' "$fields"
	exit 0
fi

prop() { adb shell getprop "$1" 2>/dev/null | tr -d '\r' | head -n 1; }
model=$(prop ro.product.model)
android=$(prop ro.build.version.release)
[ -n "$model" ] && fields="$fields,\"model\":$(str "$model")"
[ -n "$android" ] && fields="$fields,\"android\":$(str "$android")"

# dumpsys battery: "level: 87", "status: 2" (2 charging, 5 full), and
# "AC powered: true" and the like.
battery=$(adb shell dumpsys battery 2>/dev/null | tr -d '\r')
level=$(printf '%s\n' "$battery" | sed -n 's/^ *level: *\([0-9]*\) *$/\1/p' | head -n 1)
status=$(printf '%s\n' "$battery" | sed -n 's/^ *status: *\([0-9]*\) *$/\1/p' | head -n 1)
case $level in
'' | *[!0-9]*) ;;
*) [ "$level" -le 100 ] && fields="$fields,\"battery\":$level" ;;
esac
case $status in
2 | 5) charging=true ;;
'')
	if printf '%s\n' "$battery" | grep -q 'powered: true'; then charging=true; else charging=false; fi
	;;
*) charging=false ;;
esac
[ -n "$battery" ] && fields="$fields,\"charging\":$charging"

# The screen: dumpsys power says mWakefulness=Awake while it is on.
case $(adb shell dumpsys power 2>/dev/null | tr -d '\r' | sed -n 's/.*mWakefulness=\([A-Za-z]*\).*/\1/p' | head -n 1) in
Awake) fields="$fields,\"screen\":\"on\"" ;;
Asleep | Dozing | Dreaming) fields="$fields,\"screen\":\"off\"" ;;
esac

printf '{%s}\n' "$fields"
