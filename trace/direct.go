package trace

// FuncDirectVerbs and HowImports name the Attach record of a process whose
// mapped objects import mlx5dv's direct-verbs functions (Path the object,
// Err what it imports and what that hides): no probe can see the posts of
// the QPs it drives through them.
const (
	FuncDirectVerbs = "direct_verbs"
	HowImports      = "imports"
)

// FuncMemoryRead names the Attach record of the sentinel's memory reads
// of a provider's QPs in one process that cannot be made (Path the
// provider's file, Err why): those QPs' occupancy is seen only while a
// window traces them.
const FuncMemoryRead = "memory_read"
