// Command bundlecheck checks that attempt.json of an attempt bundle holds
// every progress message whole. The bundle memory test runs it as a
// program of its own, built without the race detector: in the test
// process, decompressing one 263 MB manifest took 70 s under it.
//
//	bundlecheck BUNDLE.zip EVENTS MESSAGE_BYTES
package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: bundlecheck BUNDLE.zip EVENTS MESSAGE_BYTES")
		os.Exit(2)
	}
	events, err1 := strconv.Atoi(os.Args[2])
	messageBytes, err2 := strconv.Atoi(os.Args[3])
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := check(os.Args[1], events, messageBytes); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func check(name string, events, messageBytes int) error {
	zr, err := zip.OpenReader(name)
	if err != nil {
		return fmt.Errorf("not a zip: %w", err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != "attempt.json" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer rc.Close()
		type event struct {
			Type   string `json:"type"`
			Detail struct {
				Message string `json:"message"`
			} `json:"detail"`
		}
		var m struct {
			Attempt struct {
				Number int `json:"number"`
			} `json:"attempt"`
			Events   []event `json:"events"`
			Progress []event `json:"progress"`
		}
		if err := json.NewDecoder(rc).Decode(&m); err != nil {
			return fmt.Errorf("attempt.json: %w", err)
		}
		// To the end, where the zip reader checks the CRC.
		if _, err := io.Copy(io.Discard, rc); err != nil {
			return fmt.Errorf("attempt.json: %w", err)
		}
		if m.Attempt.Number != 1 || len(m.Progress) != events || len(m.Events) < events {
			return fmt.Errorf("attempt.json: attempt %d, %d events, %d progress; want 1, ≥%d, %d", m.Attempt.Number, len(m.Events), len(m.Progress), events, events)
		}
		for _, e := range m.Progress {
			if len(e.Detail.Message) != messageBytes {
				return fmt.Errorf("a progress message of %d bytes in the bundle, want %d", len(e.Detail.Message), messageBytes)
			}
		}
		return nil
	}
	return errors.New("no attempt.json in the bundle")
}
