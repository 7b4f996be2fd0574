package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// The Grafana dashboard and the alert rules in docs/ name metrics by
// hand; these tests keep them honest: both files are well formed, and
// every sluice_ metric (and label) their PromQL reads is exposed by a real
// server or by clientlib's collector.

const (
	dashboardPath = "../../docs/grafana-dashboard.json"
	alertsPath    = "../../docs/alerts.yml"
)

// selector is one metric name read by an expression, with the label names
// its braces match on.
type selector struct {
	name   string
	labels []string
}

// promQLSelectors tokenizes a PromQL expression (or a Grafana
// label_values() query) and returns the sluice_ metrics it reads. String
// literals are skipped, so a label value never passes for a metric; label
// names are those of the matchers in the braces right after a name. It
// does not parse PromQL: a name is any identifier matching
// sluice_[a-z0-9_]+, which Sluice's own label names (outcome, source,
// command...) never do.
func promQLSelectors(expr string) []selector {
	var out []selector
	i := 0
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	skipString := func() {
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		i++
	}
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			skipString()
		case isIdent(c, true) && (i == 0 || !isIdent(expr[i-1], false) && expr[i-1] != '$'):
			start := i
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
			word := expr[start:i]
			if !metricName.MatchString(word) {
				continue
			}
			sel := selector{name: word}
			j := i
			for j < len(expr) && expr[j] == ' ' {
				j++
			}
			if j < len(expr) && expr[j] == '{' {
				// Matchers: name op "value", comma separated.
				i = j + 1
				for i < len(expr) && expr[i] != '}' {
					switch c := expr[i]; {
					case c == '"' || c == '\'' || c == '`':
						skipString()
					case isIdent(c, true):
						s := i
						for i < len(expr) && isIdent(expr[i], false) {
							i++
						}
						sel.labels = append(sel.labels, expr[s:i])
					default:
						i++
					}
				}
				i++
			}
			out = append(out, sel)
		default:
			i++
		}
	}
	return out
}

var metricName = regexp.MustCompile(`^sluice_[a-z0-9_]+$`)

// groupingLabels returns the label names of an expression's by (...)
// clauses.
func groupingLabels(expr string) []string {
	var out []string
	for _, m := range byClause.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

var byClause = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)

func TestPromQLSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []selector
	}{
		{`sum by (outcome) (rate(sluice_decisions_total{outcome="limited",instance=~"$instance"}[5m]))`,
			[]selector{{"sluice_decisions_total", []string{"outcome", "instance"}}}},
		{`sluice_raft_commit_index - sluice_raft_applied_index > 10`,
			[]selector{{"sluice_raft_commit_index", nil}, {"sluice_raft_applied_index", nil}}},
		{`histogram_quantile(0.99, sum by (le) (rate(sluice_x_seconds_bucket [5m])))`, []selector{{"sluice_x_seconds_bucket", nil}}},
		// Strings, template variables and recording-rule names are not metrics.
		{`up{job="sluice_decisions_total"} + $sluice_var + sluice:ratio + label_values(sluice_ready, instance)`,
			[]selector{{"sluice_ready", nil}}},
		{`sluice_a{l='x}"y', m!~"a\"}b"} / notsluice_b`, []selector{{"sluice_a", []string{"l", "m"}}}},
	} {
		got := promQLSelectors(tc.expr)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.expr, got, tc.want)
		}
	}
	if got := groupingLabels(`max by (job, instance) (sum by(le,command) (x))`); fmt.Sprint(got) != "[job instance le command]" {
		t.Errorf("grouping labels %v", got)
	}
}

// dashboard is the part of Grafana's dashboard model these tests read.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// readDashboard checks the dashboard's structure and returns its
// expressions, each with where it is used.
func readDashboard(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 36 {
		t.Errorf("%s: title %q, uid %q, schemaVersion %d (want both set, and 36 or later)", dashboardPath, d.Title, d.UID, d.SchemaVersion)
	}
	exprs := map[string]string{}
	hasDatasource := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			hasDatasource = hasDatasource || v.Name == "datasource" && string(v.Query) == `"prometheus"`
		case "query":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil || q.Query == "" {
				t.Errorf("variable %s: query %s", v.Name, v.Query)
			}
			exprs[q.Query] = "dashboard variable " + v.Name
		}
	}
	if !hasDatasource {
		t.Errorf("%s: no Prometheus datasource variable named datasource", dashboardPath)
	}
	ids := map[int]bool{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.W < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
			}
			if p.Type == "row" {
				if len(p.Targets) != 0 {
					t.Errorf("row %q has targets", p.Title)
				}
				walk(p.Panels)
				continue
			}
			if p.Title == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %d %q: needs a title and the ${datasource} variable as its datasource", p.ID, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no targets", p.Title)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("panel %q: target %q with refId %q (want an expression and a refId of its own)", p.Title, tg.Expr, tg.RefID)
				}
				refs[tg.RefID] = true
				checkBrackets(t, tg.Expr)
				exprs[tg.Expr] = fmt.Sprintf("dashboard panel %q", p.Title)
			}
		}
	}
	walk(d.Panels)
	return exprs
}

// checkBrackets catches the commonest hand-editing slip in PromQL.
func checkBrackets(t *testing.T, expr string) {
	t.Helper()
	var stack []byte
	pairs := map[byte]byte{')': '(', ']': '[', '}': '{'}
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '"':
			for i++; i < len(expr) && expr[i] != '"'; i++ {
				if expr[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			stack = append(stack, c)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				t.Errorf("unbalanced %q in %s", c, expr)
				return
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed %q in %s", stack, expr)
	}
}

// ruleFile is Prometheus's rule file format.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert,omitempty"`
	Record      string            `yaml:"record,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// readAlerts checks the rule file's structure and returns its
// expressions, each with where it is used.
func readAlerts(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var rf ruleFile
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	if len(rf.Groups) == 0 {
		t.Fatalf("%s: no groups", alertsPath)
	}
	exprs := map[string]string{}
	groups, alerts := map[string]bool{}, map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name of its own and rules", g.Name)
		}
		groups[g.Name] = true
		for _, r := range g.Rules {
			if r.Alert == "" || r.Record != "" || alerts[r.Alert] {
				t.Errorf("group %s: rule %q/%q: every rule here is an alert, with a name of its own", g.Name, r.Alert, r.Record)
			}
			alerts[r.Alert] = true
			if _, err := model.ParseDuration(r.For); r.For != "" && err != nil {
				t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs summary and description annotations", r.Alert)
			}
			// An application on its fallback enforces no shared limit: it
			// must page.
			for _, s := range promQLSelectors(r.Expr) {
				if strings.HasPrefix(s.name, "sluice_client_fallback_") && r.Labels["severity"] != "critical" {
					t.Errorf("%s reads %s but is not critical", r.Alert, s.name)
				}
			}
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: no expr", r.Alert)
			}
			checkBrackets(t, r.Expr)
			exprs[r.Expr] = "alert " + r.Alert
		}
	}
	if !alerts["SluiceClientOnFallback"] {
		t.Error("no SluiceClientOnFallback alert")
	}
	return exprs
}

func TestGrafanaDashboardIsWellFormed(t *testing.T) {
	if n := len(readDashboard(t)); n < 10 {
		t.Errorf("%d expressions: the dashboard lost its panels", n)
	}
}

func TestAlertRulesAreWellFormed(t *testing.T) {
	if n := len(readAlerts(t)); n < 10 {
		t.Errorf("%d expressions: the rules lost their alerts", n)
	}
}

// TestAlertRulesWithPromtool has Prometheus's own tool parse the rules and
// the dashboard's expressions, and run the rules' unit tests (testdata/alerts_test.yml: synthetic series,
// and which alerts fire when, the fallback alert's minute included).
// promtool comes with Prometheus (Debian: apt install prometheus, which
// .ci/run does); elsewhere the test is skipped without it.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool := sluicetest.Require(t, "promtool")
	// The dashboard's expressions, as recording rules, so that promtool
	// parses them too; Grafana's variables become what it would send.
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$instance", ".*")
	var rules ruleFile
	rules.Groups = make([]ruleGroup, 1)
	rules.Groups[0].Name = "dashboard"
	for expr := range readDashboard(t) {
		if strings.HasPrefix(expr, "label_values(") {
			continue // a Grafana function, not PromQL
		}
		rules.Groups[0].Rules = append(rules.Groups[0].Rules, rule{Record: fmt.Sprintf("dashboard:expr%d", len(rules.Groups[0].Rules)), Expr: vars.Replace(expr)})
	}
	b, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	dashRules := t.TempDir() + "/dashboard-rules.yml"
	if err := os.WriteFile(dashRules, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", alertsPath}, {"check", "rules", dashRules}, {"test", "rules", "testdata/alerts_test.yml"}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestDashboardAndAlertMetricsExist starts a standalone server (append-only
// file, fsync always) and a two-node cluster, each with its metrics
// listener, drives a little of everything through the standalone server
// and the leader, scrapes all three, and adds the families of a clientlib
// Limiter's collector: the raft and leader metrics exist only on a cluster
// member (some only on a follower), the append-only file's only on a
// standalone server. Every metric the dashboard and the alerts
// read must be among them, with the labels their matchers and by clauses
// name; the failure lists each one that is not, and where it is read.
func TestDashboardAndAlertMetricsExist(t *testing.T) {
	exprs := readDashboard(t)
	for e, where := range readAlerts(t) {
		exprs[e] = where
	}

	// Hot-key tracking is on by default: the hot-key panel's metrics
	// come from the defaults.
	standalone, standaloneMetrics := startWithMetrics(t, "--dir", t.TempDir(), "--requirepass", "pw", "--appendfsync", "always")
	member, memberMetrics := startWithMetrics(t, "--dir", t.TempDir(), "--requirepass", "pw",
		"--cluster-enabled", "yes", "--cluster-bootstrap", "yes")
	// A follower: some raft metrics (last contact) are followers' only.
	_, followerMetrics := startWithMetrics(t, "--dir", t.TempDir(), "--requirepass", "pw",
		"--cluster-enabled", "yes", "--cluster-join", member)
	clients := map[string]*redis.Client{}
	for _, addr := range []string{standalone, member} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Password: "pw", MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		clients[addr] = rdb
		// A new cluster answers CLUSTERDOWN until it has elected itself.
		sluicetest.WaitFor(t, 10*time.Second, addr+" deciding", func() bool {
			return rdb.Do(context.Background(), "CL.THROTTLE", "warm", 100, 1, 1).Err() == nil
		})
		// Once: the server refuses an address that keeps failing.
		raw := sluicetest.DialRaw(t, "tcp", addr)
		if got := raw.Do(t, "AUTH", "wrong"); !strings.HasPrefix(got, "-WRONGPASS") {
			t.Fatalf("AUTH wrong: %q", got)
		}
		raw.Conn().Close()
	}

	reg := prometheus.NewRegistry()
	l := clientlib.NewLimiter(clients[standalone], clientlib.WithTimeout(10*time.Second))
	reg.MustRegister(l.Collector("test"))
	if _, err := l.Allow(context.Background(), "client", clientlib.PerMinute(10)); err != nil {
		t.Fatal(err)
	}

	// Metrics that appear once there is traffic (per-command series, hot
	// keys ranked each second) get traffic until every one used is there,
	// or a few seconds have passed.
	var missing []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, rdb := range clients {
			traffic(t, rdb)
		}
		fams := map[string]*dto.MetricFamily{}
		for _, url := range []string{standaloneMetrics, memberMetrics, followerMetrics} {
			for name, f := range scrape(t, url) {
				if g, ok := fams[name]; ok {
					g.Metric = append(g.Metric, f.Metric...) // labels any node has count
				} else {
					fams[name] = f
				}
			}
		}
		gathered, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range gathered {
			fams[f.GetName()] = f
		}
		missing = missingMetrics(exprs, fams)
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("metrics and labels read by docs/grafana-dashboard.json or docs/alerts.yml that neither sluice-server nor clientlib exposes:\n  %s",
			strings.Join(missing, "\n  "))
	}
}

// traffic makes a node count a little of everything: decisions allowed and
// limited, leases acquired and refused, an error reply.
func traffic(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		rdb.Do(ctx, "CL.THROTTLE", "hot", 1, 1, 60)
	}
	rdb.Do(ctx, "CONC.ACQUIRE", "jobs", 1, 60, "ID", "a")
	rdb.Do(ctx, "CONC.ACQUIRE", "jobs", 1, 60, "ID", "b")
	if err := rdb.Do(ctx, "CL.THROTTLE", "hot", -1, 1, 60).Err(); err == nil {
		t.Fatal("a negative max_burst was accepted")
	}
}

// missingMetrics names each metric (or label) exprs read that fams lacks,
// with where it is read.
func missingMetrics(exprs map[string]string, fams map[string]*dto.MetricFamily) []string {
	uses := map[string][]string{}
	for expr, where := range exprs {
		// Labels an expression groups by must be on one of its metrics.
		grouped := map[string]bool{}
		for _, l := range groupingLabels(expr) {
			grouped[l] = l != "instance" && l != "job"
		}
		for _, s := range promQLSelectors(expr) {
			f, name, extra := family(fams, s.name)
			if f == nil {
				uses[name] = append(uses[name], where)
				grouped = nil // the missing metric is reported; its labels cannot be checked
				continue
			}
			for l := range grouped {
				if slices.Contains(extra, l) || hasLabel(f, l) {
					grouped[l] = false
				}
			}
			for _, lbl := range s.labels {
				// Prometheus adds instance and job to every series it scrapes.
				if lbl == "instance" || lbl == "job" || slices.Contains(extra, lbl) || hasLabel(f, lbl) {
					continue
				}
				key := fmt.Sprintf("%s{%s} (the metric exists, the label does not)", name, lbl)
				uses[key] = append(uses[key], where)
			}
		}
		for l, unseen := range grouped {
			if unseen {
				key := fmt.Sprintf("label %s, grouped by, on none of the metrics read", l)
				uses[key] = append(uses[key], where)
			}
		}
	}
	var out []string
	for name, where := range uses {
		sort.Strings(where)
		out = append(out, fmt.Sprintf("%s (in %s)", name, strings.Join(slices.Compact(where), ", ")))
	}
	sort.Strings(out)
	return out
}

// family finds the family a series name belongs to: itself, or a
// histogram's (a summary's) for its _bucket, _sum and _count series. name
// is the family's name, found or not; extra the labels the suffix adds.
func family(fams map[string]*dto.MetricFamily, series string) (f *dto.MetricFamily, name string, extra []string) {
	if f := fams[series]; f != nil {
		return f, series, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if !ok {
			continue
		}
		f := fams[base]
		if f == nil {
			return nil, base, nil
		}
		switch {
		case f.GetType() == dto.MetricType_HISTOGRAM && suffix == "_bucket":
			return f, base, []string{"le"}
		case f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket":
			return f, base, nil
		}
		return nil, series + " (" + base + " is a " + f.GetType().String() + ")", nil
	}
	return nil, series, nil
}

func hasLabel(f *dto.MetricFamily, name string) bool {
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == name {
				return true
			}
		}
	}
	return false
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return fams
}

// startWithMetrics starts sluice-server with a metrics listener on a free
// port (startProbed) and returns its client address and its metrics URL.
func startWithMetrics(t *testing.T, args ...string) (addr, metricsURL string) {
	t.Helper()
	ps := startProbed(t, args...)
	return ps.addr(t), "http://" + ps.probes + "/metrics"
}
