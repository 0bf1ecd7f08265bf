package cli

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/sqscope/sqscope/probe"
)

// lookupUser is the user -u names, by name or number, with its primary
// and supplementary groups.
func lookupUser(name string) (*probe.Cred, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr != nil {
			return nil, fmt.Errorf("-u %s: no such user", name)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("-u %s: no user has that id", name)
		}
	}
	c := &probe.Cred{User: name}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("-u %s: user id %q or group id %q is not a number", name, u.Uid, u.Gid)
	}
	c.UID, c.GID = uint32(uid), uint32(gid)
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("-u %s: its groups: %w", name, err)
	}
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("-u %s: group id %q is not a number", name, g)
		}
		c.Groups = append(c.Groups, uint32(n))
	}
	return c, nil
}
