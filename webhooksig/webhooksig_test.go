package webhooksig_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/webhooksig"
)

const testSecret = "test-webhook-secret-0123456789"

func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"e1","type":"job.dead"}`)
	now := time.Unix(1_800_000_000, 0)
	sig := webhooksig.Sign(testSecret, now, body)
	if !strings.HasPrefix(sig, "t=1800000000,v1=") || len(sig) != len("t=1800000000,v1=")+64 {
		t.Fatalf("signature %q: want t=UNIX,v1=<64 hex digits>", sig)
	}
	if err := webhooksig.Verify(testSecret, sig, body, now, 5*time.Minute); err != nil {
		t.Fatalf("the right secret does not verify: %v", err)
	}
	for name, tc := range map[string]struct {
		secret, header string
		body           []byte
		at             time.Time
	}{
		"WrongSecret":  {"another-secret-0123456789", sig, body, now},
		"OtherBody":    {testSecret, sig, []byte(`{"id":"e1","type":"job.succeeded"}`), now},
		"OtherTime":    {testSecret, strings.Replace(sig, "t=1800000000", "t=1800000001", 1), body, now},
		"TooOld":       {testSecret, sig, body, now.Add(10 * time.Minute)},
		"NoMAC":        {testSecret, "t=1800000000", body, now},
		"Garbage":      {testSecret, "v1=zz,t=x", body, now},
		"EmptyHeader":  {testSecret, "", body, now},
		"TruncatedMAC": {testSecret, sig[:len(sig)-2], body, now},
	} {
		t.Run(name, func(t *testing.T) {
			if err := webhooksig.Verify(tc.secret, tc.header, tc.body, tc.at, 5*time.Minute); err == nil {
				t.Fatalf("%q verified", tc.header)
			}
		})
	}
}
