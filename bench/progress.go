package bench

import (
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressAfter is how long a run must be expected to last (or, for a run
// bounded only by count, must have lasted) before a progress bar appears.
const progressAfter = 2 * time.Second

// showProgress draws a progress bar to cfg.Progress until stop closes. A
// run bounded by time shows elapsed time; one bounded only by count shows
// requests done.
func showProgress(cfg Config, target string, workers []*worker, start time.Time, stop <-chan struct{}) {
	byTime := cfg.Duration > 0
	if byTime && cfg.Duration <= progressAfter {
		return
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var bar *progressbar.ProgressBar
	defer func() {
		if bar != nil {
			bar.Finish()
		}
	}()
	desc := fmt.Sprintf("%s %s", target, cfg.Mode)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		elapsed := time.Since(start)
		if !byTime && elapsed < progressAfter {
			continue
		}
		var done int64
		for _, w := range workers {
			done += w.progress.Load()
		}
		if bar == nil {
			max := cfg.Requests
			if byTime {
				max = cfg.Duration.Milliseconds()
			}
			bar = progressbar.NewOptions64(max,
				progressbar.OptionSetWriter(cfg.Progress),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetPredictTime(false),
				progressbar.OptionClearOnFinish(),
			)
		}
		bar.Describe(fmt.Sprintf("%s: %d requests, %.0f/s", desc, done, float64(done)/elapsed.Seconds()))
		if byTime {
			bar.Set64(min(elapsed.Milliseconds(), cfg.Duration.Milliseconds()))
		} else {
			bar.Set64(min(done, cfg.Requests))
		}
	}
}
