#!/bin/sh
# postflight.sh: leaves the phone as it found it after each job, whatever
# the outcome ($LEASEHOLD_OUTCOME: succeeded or failed), for
#
#   worker --postflight examples/postflight.sh ...
#
# It stops the job's app ($LEASEHOLD_APP), clears its data (or uninstalls
# it with POSTFLIGHT_UNINSTALL=1), and goes to the home screen. It fails
# (exit 1, the reason on stderr) when adb can no longer drive the phone or
# a step fails: the worker then claims nothing until a preflight passes.
# What it prints is kept on the attempt.
set -u

fail() {
	echo "$*" >&2
	exit 1
}

command -v adb >/dev/null 2>&1 || fail "adb is not on PATH: install Android platform-tools on this worker"
state=$(adb get-state 2>&1 | tr -d '\r')
[ "$state" = device ] || fail "adb cannot drive the phone after the job: $state"

app=${LEASEHOLD_APP:-}
if [ -n "$app" ]; then
	adb shell am force-stop "$app" >/dev/null 2>&1 || fail "stopping $app failed"
	if [ "${POSTFLIGHT_UNINSTALL:-0}" = 1 ]; then
		adb uninstall "$app" >/dev/null 2>&1 || fail "uninstalling $app failed"
		echo "app: $app uninstalled"
	else
		adb shell pm clear "$app" >/dev/null 2>&1 || fail "clearing the data of $app failed"
		echo "app: $app stopped, data cleared"
	fi
fi
adb shell input keyevent KEYCODE_HOME >/dev/null 2>&1 || fail "going home failed"
echo "home screen (after a job that ${LEASEHOLD_OUTCOME:-ended})"
