package server

import "testing"

// BenchmarkACLCheck is the cost of the permission check a restricted user
// pays on every command (the default user skips it): the command's bit and
// each key against the patterns.
func BenchmarkACLCheck(b *testing.B) {
	st := NewACL("")
	if err := st.setUser("app", [][]byte{[]byte("on"), []byte("nopass"), []byte("~sluice-bench:*"), []byte("-@all"), []byte("+@limiter")}); err != nil {
		b.Fatal(err)
	}
	u := st.get("app").rules.Load()
	cmd := commands["cl.throttle"]
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("sluice-bench:cl.throttle:00001234"), []byte("99"), []byte("100"), []byte("1")}
	buf := make([]keyRef, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := u.check(cmd, args, buf); d != aclOK {
			b.Fatal(d)
		}
	}
}
