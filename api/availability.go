package api

// Availability is the weekly window of a device label or a worker
// (scope): outside it nothing is claimed for it.
type Availability struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	// Window as written, e.g. "mon-fri 22:00-07:00 Europe/Berlin"; Zone
	// its time zone (UTC when it names none).
	Window string `json:"window"`
	Zone   string `json:"zone"`
	// Open says whether it is open now; Closes when it closes (absent
	// while closed, or for a window open all the time), Opens when it
	// opens next (absent while open).
	Open      bool    `json:"open"`
	Closes    *Time   `json:"closes,omitempty"`
	Opens     *Time   `json:"opens,omitempty"`
	UpdatedAt Time    `json:"updated_at"`
	UpdatedBy *string `json:"updated_by"`
}

// Availabilities is GET /api/v1/availability.
type Availabilities struct {
	Windows []Availability `json:"windows"`
}

// AvailabilityPut is the body of PUT /api/v1/availability/{scope}/{name}
// and of PUT /api/v1/worker/availability.
type AvailabilityPut struct {
	Window string `json:"window"`
}
