#!/bin/sh
# preflight.sh: checks the phone next to this worker before each job, for
#
#   worker --preflight examples/preflight.sh ...
#
# It fails (exit 1, the reason on stderr) when the phone is not fit to
# start a job: adb cannot drive it, its screen is off or locked, it has
# less than PREFLIGHT_MIN_FREE_MB (default 500) free on /data, or the
# job's app ($LEASEHOLD_APP) is neither installed nor installable (an APK
# at $PREFLIGHT_APK_DIR/APP.apk, installed here). It then goes to the home
# screen. The worker releases the job uncounted when it fails, and claims
# nothing until it passes again (run every minute meanwhile, with no job:
# LEASEHOLD_APP is empty then). What it prints is kept on the attempt.
set -u

fail() {
	echo "$*" >&2
	exit 1
}

command -v adb >/dev/null 2>&1 || fail "adb is not on PATH: install Android platform-tools on this worker"

state=$(adb get-state 2>&1 | tr -d '\r')
[ "$state" = device ] || fail "adb cannot drive the phone: $state"
echo "adb: device"

awake=$(adb shell dumpsys power 2>/dev/null | tr -d '\r' | grep -o 'mWakefulness=[A-Za-z]*' | head -n 1)
case $awake in
mWakefulness=Awake | "") echo "screen: on" ;;
*) fail "screen is off ($awake): wake and unlock the phone" ;;
esac

if adb shell dumpsys window 2>/dev/null | tr -d '\r' | grep -q -e 'mDreamingLockscreen=true' -e 'isStatusBarKeyguard=true'; then
	fail "the phone is locked: unlock it (or turn the lock screen off)"
fi
echo "lock screen: not showing"

# df -k /data: the fourth column of its last line is free KiB.
free_kb=$(adb shell df -k /data 2>/dev/null | tr -d '\r' | awk 'NR > 1 { v = $4 } END { print v }')
min_mb=${PREFLIGHT_MIN_FREE_MB:-500}
case $free_kb in
'' | *[!0-9]*) echo "storage: unknown (df gave no figure)" ;;
*)
	[ "$free_kb" -ge $((min_mb * 1024)) ] || fail "only $((free_kb / 1024)) MB free on /data, under $min_mb MB"
	echo "storage: $((free_kb / 1024)) MB free"
	;;
esac

app=${LEASEHOLD_APP:-}
if [ -n "$app" ]; then
	if adb shell pm path "$app" >/dev/null 2>&1; then
		echo "app: $app installed"
	elif [ -n "${PREFLIGHT_APK_DIR:-}" ] && [ -f "$PREFLIGHT_APK_DIR/$app.apk" ]; then
		adb install -r "$PREFLIGHT_APK_DIR/$app.apk" >/dev/null 2>&1 || fail "installing $app from $PREFLIGHT_APK_DIR/$app.apk failed"
		echo "app: $app installed from $PREFLIGHT_APK_DIR/$app.apk"
	else
		fail "app $app is not installed, and there is no $app.apk in PREFLIGHT_APK_DIR to install it"
	fi
fi

adb shell input keyevent KEYCODE_HOME >/dev/null 2>&1
echo "home screen"
