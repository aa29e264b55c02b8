// Command testagent is the scripted ACP agent of package
// github.com/ochat-dev/ochat/internal/testagent on stdio. The package doc
// lists its scenarios and TESTAGENT_* environment variables.
package main

import (
	"fmt"
	"os"

	"github.com/ochat-dev/ochat/internal/testagent"
)

func main() {
	if err := testagent.Run(os.Stdin, os.Stdout, testagent.OptionsFromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(1)
	}
}
