package web

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// ParseTrustedProxies reads LEASEHOLD_TRUSTED_PROXIES: comma-separated IP
// addresses and CIDR ranges of the reverse proxies whose X-Forwarded-For
// is believed. An empty list trusts nobody.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parseTrustedProxy(item)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want an IP address or a CIDR range such as 10.0.0.0/8", item)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseTrustedProxy(item string) (netip.Prefix, error) {
	if strings.Contains(item, "/") {
		p, err := netip.ParsePrefix(item)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(item)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("not an address: %q", item)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ipExtractor decides whose address a request is. Without trusted
// proxies it is the TCP peer's, whatever the headers say. With them, it
// is the nearest address in X-Forwarded-For that is not a trusted proxy,
// read only when the peer itself is one; loopback and private ranges are
// trusted only when listed.
func ipExtractor(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{
			IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
		}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
