// Package webhooksig signs and verifies Leasehold's webhook deliveries. It
// imports only the standard library, so a receiver can check a request
// without pulling in the server.
//
// The Header of a delivery is "t=UNIX,v1=HEX", HEX being
// hex(HMAC-SHA256(secret, t + "." + body)).
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is the request header that carries the signature.
const Header = "Leasehold-Signature"

// Sign returns the signature header's value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// ErrSignature means a signature does not match the body and secret, or
// is too old.
var ErrSignature = errors.New("webhook signature does not verify")

// Verify checks a signature header as a receiver would: the MAC (in
// constant time) and, when tolerance > 0, that t is within tolerance of
// now (a replayed old request fails).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var macs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				macs = append(macs, b)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(macs) == 0 {
		return fmt.Errorf("%w: want t=UNIX,v1=HEX", ErrSignature)
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
			return fmt.Errorf("%w: signed %s from now", ErrSignature, d.Round(time.Second))
		}
	}
	want := mac(secret, ts, body)
	for _, m := range macs {
		if hmac.Equal(m, want) {
			return nil
		}
	}
	return ErrSignature
}
