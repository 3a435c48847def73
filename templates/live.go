package templates

import "github.com/a-h/templ"

// liveSource opens a page's event stream on <main>, which live parts are
// inside of and which no refresh replaces.
func liveSource(url string) templ.Attributes {
	if url == "" {
		return nil
	}
	return templ.Attributes{"hx-ext": "sse", "sse-connect": url}
}

// liveTrigger is what refreshes a live part, which replaces itself
// (outerHTML): the named events of the page's stream, and a reset (the
// stream could not replay what it missed), when the page has live
// updates; poll otherwise. data-poll is the fallback app.js switches to
// in a browser without EventSource.
//
// No event may be lost between a refresh's request and its swap: an event
// then aborts the request in flight and asks again (hx-sync replace;
// queued instead, it would be dropped with the element it was queued on),
// and the new part is set up in the same task as the swap (settle:0ms),
// so that it listens before the next event can arrive.
//
// The part's hx-sync is not inherited (hx-disinherit): a form inside it
// (Retry, Cancel) would otherwise share the part's queue, and the event
// its own change sends would abort its request in flight, losing the
// answer that says what changed.
func liveTrigger(pushed bool, events, poll string) templ.Attributes {
	if !pushed {
		return templ.Attributes{"hx-trigger": poll, "hx-swap": "outerHTML"}
	}
	return templ.Attributes{
		"hx-trigger": events + ", sse:reset", "data-poll": poll,
		"hx-swap": "outerHTML settle:0ms", "hx-sync": "this:replace", "hx-disinherit": "hx-sync",
	}
}
