package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/db"
)

// Bounds of what a device-info command may say: the whole object, its
// keys and its string values. Output beyond MaxDeviceInfoBytes is refused
// (the worker stops reading there); presence carries no more than that.
const (
	MaxDeviceInfoBytes = 8 << 10
	maxDeviceInfoKeys  = 64
	maxDeviceInfoKey   = 64
	maxDeviceInfoValue = 1024
	// MaxReasonBytes bounds why a worker does not claim, and the error of
	// its last device-info run, as presence carries them.
	MaxReasonBytes = 1024
)

// DefaultMinBattery is the battery level (percent) under which a worker
// whose phone is not charging stops claiming.
const DefaultMinBattery = 15

// ADB states a device-info command reports in "adb"; only AdbDevice is a
// phone adb can drive.
const (
	AdbDevice       = "device"
	AdbOffline      = "offline"
	AdbUnauthorized = "unauthorized"
)

// DeviceInfo is what a worker's device-info command said about its phone:
// one JSON object whose "battery" is an integer 0–100, "charging" a
// boolean, and every other value a string (serial, model, android,
// screen, adb, and any key of the command's own, kept as it was).
type DeviceInfo struct {
	// Raw is the object as the command printed it, compacted.
	Raw      json.RawMessage
	Battery  *int
	Charging *bool
	Adb      string // "" when the command did not say
	Model    string
	Android  string
}

// ParseDeviceInfo checks the output of a device-info command, b, and
// returns the facts: the same rule for what a direct worker stores and for
// what the server accepts from a remote one.
func ParseDeviceInfo(b []byte) (DeviceInfo, error) {
	b = bytes.TrimSpace(b)
	if len(b) > MaxDeviceInfoBytes {
		return DeviceInfo{}, fmt.Errorf("device info is over %d bytes", MaxDeviceInfoBytes)
	}
	if len(b) == 0 {
		return DeviceInfo{}, errors.New("device info is empty: want one JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return DeviceInfo{}, fmt.Errorf("device info is not a JSON object: %s", clipError(b, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return DeviceInfo{}, errors.New("device info must be one JSON object, with nothing after it")
	}
	if len(fields) > maxDeviceInfoKeys {
		return DeviceInfo{}, fmt.Errorf("device info has %d keys: at most %d", len(fields), maxDeviceInfoKeys)
	}
	// Strings and keys as jsonb takes them (no \u0000, no unpaired
	// surrogate escape), numbers as every document's (checkDocument).
	if problem := checkDocument(b, MaxDeviceInfoBytes); problem != "" {
		return DeviceInfo{}, fmt.Errorf("device info %s", problem)
	}
	var info DeviceInfo
	for k, v := range fields {
		if k == "" || len(k) > maxDeviceInfoKey || !utf8.ValidString(k) {
			return DeviceInfo{}, fmt.Errorf("device info key %q: want 1 to %d characters", k, maxDeviceInfoKey)
		}
		switch k {
		case "battery":
			n, ok := v.(json.Number)
			level, err := strconv.Atoi(string(n))
			if !ok || err != nil || level < 0 || level > 100 {
				return DeviceInfo{}, fmt.Errorf(`device info "battery" must be an integer from 0 to 100, not %s`, describe(v))
			}
			info.Battery = &level
		case "charging":
			c, ok := v.(bool)
			if !ok {
				return DeviceInfo{}, fmt.Errorf(`device info "charging" must be true or false, not %s`, describe(v))
			}
			info.Charging = &c
		default:
			s, ok := v.(string)
			if !ok {
				return DeviceInfo{}, fmt.Errorf("device info %q must be a string, not %s", k, describe(v))
			}
			if len(s) > maxDeviceInfoValue {
				return DeviceInfo{}, fmt.Errorf("device info %q is over %d bytes", k, maxDeviceInfoValue)
			}
			switch k {
			case "adb":
				info.Adb = s
			case "model":
				info.Model = s
			case "android":
				info.Android = s
			}
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return DeviceInfo{}, fmt.Errorf("device info: %w", err)
	}
	info.Raw = compact.Bytes()
	return info, nil
}

// describe names a JSON value's type for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return string(v)
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// clipError says why b is not JSON, quoting at most its start.
func clipError(b []byte, err error) string {
	start := b
	if len(start) > 40 {
		start = start[:40]
	}
	if err == nil {
		return fmt.Sprintf("%q", start)
	}
	return fmt.Sprintf("%v (output starts %q)", err, start)
}

// DeviceHealth says whether a worker whose phone reports info may claim
// jobs, and why not: adb must see the phone ("device"), and a phone that
// is not charging must have at least minBattery percent. Facts the
// command does not report are not held against it.
func DeviceHealth(info DeviceInfo, minBattery int) (claiming bool, reason string) {
	if info.Adb != "" && info.Adb != AdbDevice {
		return false, "adb " + info.Adb
	}
	if info.Battery != nil && *info.Battery < minBattery && (info.Charging == nil || !*info.Charging) {
		return false, fmt.Sprintf("battery %d%% (under %d%%) and not charging", *info.Battery, minBattery)
	}
	return true, ""
}

// DeviceAvailability is how the online workers stand toward a job that
// names a device: those that carry its label and take its queue, how many
// of them claim, and why the others do not ("id: reason").
type DeviceAvailability struct {
	Online, Claiming int64
	Reasons          []string
}

// DeviceAvailability looks at the workers seen within online (database
// clock) that could run a job for device in queue.
func (c *Client) DeviceAvailability(ctx context.Context, device, queue string, online time.Duration) (DeviceAvailability, error) {
	r, err := c.q.WorkerDeviceAvailability(ctx, db.WorkerDeviceAvailabilityParams{
		Device: device, Queue: queue, OnlineMs: online.Milliseconds(),
	})
	if err != nil {
		return DeviceAvailability{}, fmt.Errorf("looking for %s workers: %w", device, err)
	}
	return DeviceAvailability{Online: r.Online, Claiming: r.Claiming, Reasons: r.Reasons}, nil
}
