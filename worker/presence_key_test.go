package worker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// What a presence says decides whether it is written again: any change
// of devices, queues or device report is, and so is the same info
// gathered anew; the time it is sent is not.
func TestPresenceKeyTellsChangesApart(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	info := json.RawMessage(`{"battery":80}`)
	base := queue.Presence{ID: "w", Devices: []string{"pixel7"}, Queues: []string{"default"},
		Device: &queue.DeviceReport{Info: info, InfoAge: 2 * time.Second, Claiming: true}}
	was := keyOf(base, now)
	with := func(change func(p *queue.Presence)) queue.Presence {
		p := base
		d := *base.Device
		p.Device = &d
		change(&p)
		return p
	}
	// The same info, sent 10 s later: 10 s older.
	if k := keyOf(with(func(p *queue.Presence) { p.Device.InfoAge += 10 * time.Second }), now.Add(10*time.Second)); !k.same(was) {
		t.Error("the same report sent later counts as a change")
	}
	for name, p := range map[string]queue.Presence{
		"devices":       with(func(p *queue.Presence) { p.Devices = []string{"pixel8"} }),
		"queues":        with(func(p *queue.Presence) { p.Queues = []string{"default", "slow"} }),
		"info":          with(func(p *queue.Presence) { p.Device.Info = json.RawMessage(`{"battery":79}`) }),
		"gathered anew": with(func(p *queue.Presence) { p.Device.InfoAge = 0 }),
		"unfit":         with(func(p *queue.Presence) { p.Device.Claiming, p.Device.Reason = false, "preflight failed" }),
		"info error":    with(func(p *queue.Presence) { p.Device.Error = "adb: no device" }),
		"no device":     with(func(p *queue.Presence) { p.Device = nil }),
	} {
		if keyOf(p, now.Add(10*time.Second)).same(was) {
			t.Errorf("%s changed, and the presence counts as unchanged", name)
		}
	}
}
