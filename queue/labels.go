package queue

// MaxWorkerDevices bounds the device labels a worker may announce.
const MaxWorkerDevices = 32

// checkDevices refuses what a worker's record cannot sensibly hold: more
// than MaxWorkerDevices labels, or one that is not a label.
func checkDevices(devices []string) error {
	if len(devices) > MaxWorkerDevices {
		return invalid("devices", "must name at most %d devices", MaxWorkerDevices)
	}
	for _, d := range devices {
		if !labelPattern.MatchString(d) {
			return invalid("devices", "each must match [A-Za-z0-9_.:-]{1,64}")
		}
	}
	return nil
}
