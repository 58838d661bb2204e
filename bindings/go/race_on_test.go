//go:build race

package sandgate_test

const raceEnabled = true
