package artifacttest_test

import (
	"bytes"
	"testing"

	"github.com/leasehold/leasehold/artifact/artifacttest"
	"github.com/leasehold/leasehold/screenhash"
)

// The screens the failure-group tests fail on are what they stand for:
// one layout with two clocks is one screen to screenhash, and two
// layouts are far apart, by more than twice what counts as one screen,
// so that a test that tells them apart does not pass by a few bits.
func TestScreensHashAsTheyShould(t *testing.T) {
	t.Parallel()
	hash := func(layout, clock string) uint64 {
		t.Helper()
		h, err := screenhash.Decode(bytes.NewReader(artifacttest.Screen(t, layout, clock)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	layouts := []string{artifacttest.ScreenLogin, artifacttest.ScreenCrash, artifacttest.ScreenList}
	hashes := map[string]uint64{}
	for _, l := range layouts {
		hashes[l] = hash(l, "10:41")
		if d := screenhash.Distance(hashes[l], hash(l, "23:07")); d != 0 {
			t.Errorf("%s at two clocks: %d bits apart, want 0", l, d)
		}
	}
	for i, a := range layouts {
		for _, b := range layouts[i+1:] {
			d := screenhash.Distance(hashes[a], hashes[b])
			t.Logf("%s and %s: %d bits apart", a, b, d)
			if d <= 2*screenhash.Similar {
				t.Errorf("%s and %s are %d bits apart, want more than %d", a, b, d, 2*screenhash.Similar)
			}
		}
	}
}
