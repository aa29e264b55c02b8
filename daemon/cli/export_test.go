package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/daemon"
)

// TestImportRefusesNonLogs: files without one valid event create nothing;
// a native session file is opened through ochat/sessions/open instead.
func TestImportRefusesNonLogs(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	for _, tt := range []struct{ file, want string }{
		{passwd, passwd + ":1: "},
		{empty, "the file is empty"},
	} {
		code, out, errs := d.run(t, "", "import", tt.file)
		if code != 1 || !strings.Contains(errs, tt.want) || !strings.Contains(errs, "nothing was imported") || out != "" {
			t.Errorf("import %s: %d %q %q", tt.file, code, out, errs)
		}
	}
	if n := conversationCount(t, d); n != 0 {
		t.Fatalf("refused imports created %d conversations", n)
	}

	code, out, errs := d.run(t, "", "import", d.claudeFile)
	if code != 0 || !strings.Contains(errs, "native claude session") || !strings.Contains(errs, "ochat/sessions/open") {
		t.Fatalf("import native: %d %q %q", code, out, errs)
	}
	id := strings.Fields(out)[0]
	if n := conversationCount(t, d); n != 1 {
		t.Fatalf("conversations after native import = %d", n)
	}

	code, out, errs = d.run(t, "", "rename", id, "new", "title")
	if code != 0 || !strings.Contains(out, `"new title"`) {
		t.Fatalf("rename: %d %q %q", code, out, errs)
	}
	code, out, _ = d.run(t, "", "conversations")
	if code != 0 || !strings.Contains(out, "new title") {
		t.Errorf("after rename:\n%s", out)
	}
	code, out, errs = d.run(t, "", "delete", id)
	if code != 0 || !strings.Contains(out, "deleted "+id) {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
	if n := conversationCount(t, d); n != 0 {
		t.Errorf("conversations after delete = %d", n)
	}
	if code, _, errs = d.run(t, "", "delete", id); code != 1 || errs == "" {
		t.Errorf("delete again: %d %q", code, errs)
	}
	if code, _, _ = d.run(t, "", "rename", id); code != 2 {
		t.Errorf("rename without a title: %d", code)
	}
}

func conversationCount(t *testing.T, d *cliDaemon) int {
	t.Helper()
	code, out, errs := d.run(t, "", "conversations", "--json")
	if code != 0 {
		t.Fatalf("conversations: %d %s", code, errs)
	}
	var list []daemon.ConversationInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return len(list)
}
