package trace

// FuncDirectVerbs and HowImports name the Attach record of a process whose
// mapped objects import mlx5dv's direct-verbs functions (Path the object,
// Err what it imports and what that hides): no probe can see the posts of
// the QPs it drives through them.
const (
	FuncDirectVerbs = "direct_verbs"
	HowImports      = "imports"
)
