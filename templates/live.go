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

// liveTrigger is what refreshes a live part: the named events of the
// page's stream, and a reset (the stream could not replay what it
// missed), when the page has live updates; poll otherwise. data-poll is
// the fallback app.js switches to in a browser without EventSource.
func liveTrigger(pushed bool, events, poll string) templ.Attributes {
	if !pushed {
		return templ.Attributes{"hx-trigger": poll}
	}
	return templ.Attributes{"hx-trigger": events + ", sse:reset", "data-poll": poll}
}
