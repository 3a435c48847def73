#!/bin/sh
# investigate.sh: an app investigation on a real Android phone, driven by
# adb, for Leasehold's exec executor:
#
#   worker --executor exec --exec "examples/investigate.sh"
#
# The contract (SPEC.md, "Executors"): the job's payload arrives on stdin;
# LEASEHOLD_JOB_ID, LEASEHOLD_ATTEMPT, LEASEHOLD_ARTIFACT_DIR and
# LEASEHOLD_EFFECTS_URL come from the environment; stdout lines that are
# JSON objects are events ({"progress":…}, and a final {"result":…});
# exit 0 succeeds, 100 fails for good, anything else is retried.
#
# It launches payload.app, takes a screenshot, taps through a few screens
# with a screenshot after each, saves a UI dump and a logcat excerpt, and
# force-stops the app. The taps are a fixed stand-in for an AI agent: see
# decide_and_act below and README.md for where a model goes.
#
# adb honours ANDROID_SERIAL when several phones are attached.
# INVESTIGATE_WAIT is how long, in seconds, to let the app settle after an
# action (default 2).
#
# Limits: the payload is read with sed, not a JSON parser. "app" must be a
# plain package name (anything else fails permanently, which also keeps it
# out of the phone's shell); "instructions" is the last such key in the
# payload, a JSON string kept as it was written, escapes included.
set -u

APP=
WAIT=${INVESTIGATE_WAIT:-2}
DIR=${LEASEHOLD_ARTIFACT_DIR:-./leasehold-artifacts}
SHOTS=0
sleeper=

# progress PERCENT MESSAGE prints a progress event; MESSAGE must not
# need JSON escaping.
progress() { printf '{"progress":%d.%02d,"message":"%s"}\n' $(($1 / 100)) $(($1 % 100)) "$2"; }
log() { printf 'investigate: %s\n' "$*" >&2; }

# force_stop bounds the call: a phone that has gone away must not keep
# a stopping job alive until the worker's SIGKILL.
force_stop() {
	[ -n "$APP" ] || return 0
	if command -v timeout >/dev/null 2>&1; then
		timeout 5 adb shell am force-stop "$APP" >/dev/null 2>&1
	else
		adb shell am force-stop "$APP" >/dev/null 2>&1
	fi
}

# The worker sends SIGTERM (then SIGKILL) when the lease is lost, the job
# is cancelled or the worker shuts down: leave the phone as we found it
# and go.
on_term() {
	trap - TERM INT
	[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
	log "stopped by a signal; force-stopping $APP"
	force_stop
	exit 143
}
trap on_term TERM INT

# pause sleeps in the background and waits for it: a trapped signal ends
# wait at once, where it would wait for a foreground sleep to finish.
pause() {
	sleep "$1" >/dev/null 2>&1 &
	sleeper=$!
	wait "$sleeper"
	sleeper=
}

# save FILE CMD...: runs CMD into FILE in the artifact folder. It writes a
# name the worker does not upload and renames it when complete, so that
# no half-written file is ever picked up.
save() {
	file=$1
	shift
	if "$@" >"$DIR/.$file.part" && [ -s "$DIR/.$file.part" ]; then
		mv "$DIR/.$file.part" "$DIR/$file"
		return 0
	fi
	rm -f "$DIR/.$file.part"
	log "could not save $file"
	return 1
}

screenshot() {
	name=$(printf 'step-%02d.png' $((SHOTS + 1)))
	if save "$name" adb exec-out screencap -p; then
		SHOTS=$((SHOTS + 1))
	fi
}

# --- The payload --------------------------------------------------------
payload=$(tr '\n\r' '  ')
APP=$(printf '%s' "$payload" | sed -n 's/.*"app"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
INSTRUCTIONS=$(printf '%s' "$payload" |
	sed -n -E 's/.*"instructions"[[:space:]]*:[[:space:]]*"(([^"\\]|\\.)*)".*/\1/p')
if ! printf '%s\n' "$APP" | grep -Eq '^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$'; then
	bad=$APP
	APP=
	log "payload.app must be an Android package name like com.example.notes, got \"$bad\""
	exit 100
fi
mkdir -p "$DIR" || exit 1
log "job ${LEASEHOLD_JOB_ID:-?} attempt ${LEASEHOLD_ATTEMPT:-?}: investigating $APP"

# --- The phone ----------------------------------------------------------
progress 5 "checking the phone"
if ! command -v adb >/dev/null 2>&1; then
	log "adb is not on PATH: install Android platform-tools on this worker"
	exit 1
fi
state=$(adb get-state 2>&1 | tr -d '\r')
if [ "$state" != device ]; then
	# Retried: a phone that is rebooting, unplugged or waiting for the
	# USB debugging prompt may well be back for the next attempt.
	log "no phone ready (adb get-state: $state); check 'adb devices'"
	exit 1
fi
SERIAL=$(adb get-serialno 2>/dev/null | tr -cd 'A-Za-z0-9._:-')
if ! adb shell pm path "$APP" 2>/dev/null | grep -q '^package:'; then
	log "$APP is not installed on phone $SERIAL: install it (from its store page) and retry the job"
	APP=
	exit 100
fi
size=$(adb shell wm size 2>/dev/null | tr -d '\r' | sed -n 's/.*size: *\([0-9]*\)x\([0-9]*\).*/\1 \2/p' | tail -n 1)
W=${size% *}
H=${size#* }
case "$W:$H" in
*[!0-9:]* | :* | *: | 0:* | *:0) W=1080 H=1920 ;;
esac

# --- Launch -------------------------------------------------------------
progress 15 "launching $APP"
adb shell input keyevent KEYCODE_WAKEUP >/dev/null 2>&1
if ! adb shell monkey -p "$APP" -c android.intent.category.LAUNCHER 1 >&2; then
	log "could not launch $APP"
	exit 1
fi
pause "$WAIT"
screenshot
progress 25 "launched $APP"

# --- Explore ------------------------------------------------------------
# decide_and_act is where an agent belongs: given the step, the latest
# screenshot and UI dump, choose one action, set DID to say what it is
# (empty: the investigation is over) and perform it with adb input. This
# stand-in follows a fixed plan of four actions.
decide_and_act() {
	case $1 in
	1)
		DID="tapped the middle of the screen"
		adb shell input tap $((W / 2)) $((H / 2))
		;;
	2)
		DID="scrolled down"
		adb shell input swipe $((W / 2)) $((H * 3 / 4)) $((W / 2)) $((H / 4)) 300
		;;
	3)
		DID="tapped near the top"
		adb shell input tap $((W / 2)) $((H / 5))
		;;
	4)
		DID="went back"
		adb shell input keyevent KEYCODE_BACK
		;;
	*) DID= ;;
	esac
}
step=1
while :; do
	if ! decide_and_act "$step" >&2; then
		log "step $step failed: $DID"
		force_stop
		exit 1
	fi
	[ -n "$DID" ] || break
	pause "$WAIT"
	screenshot
	progress $((25 + step * 12)) "$DID"
	step=$((step + 1))
done

# --- Evidence -----------------------------------------------------------
progress 80 "saving the UI dump and logcat"
UI=false
if adb shell uiautomator dump /sdcard/leasehold-ui.xml >/dev/null 2>&1 &&
	save ui.xml adb exec-out cat /sdcard/leasehold-ui.xml; then
	UI=true
fi
adb shell rm -f /sdcard/leasehold-ui.xml >/dev/null 2>&1
LOGLINES=0
if save logcat.txt adb logcat -d -t 500; then
	LOGLINES=$(wc -l <"$DIR/logcat.txt" | tr -d ' ')
fi

# --- Done ---------------------------------------------------------------
force_stop
progress 100 "done"
if [ "$SHOTS" -eq 0 ]; then
	log "no screenshot could be taken"
	exit 1
fi
printf '{"result":{"app":"%s","device":"%s","screen":"%sx%s","screenshots":%d,"ui_dump":%s,"logcat_lines":%d,"instructions":"%s","summary":"launched %s and explored %d screens"}}\n' \
	"$APP" "$SERIAL" "$W" "$H" "$SHOTS" "$UI" "$LOGLINES" "$INSTRUCTIONS" "$APP" $((step - 1))
