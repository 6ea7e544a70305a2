package agent

import "encoding/json"

// rolesColumn is the authenticated_roles column as DBOS writes it: a JSON
// list of the roles, or NULL when there are none (DBOS stores no empty list).
func rolesColumn(roles []string) *string {
	if len(roles) == 0 {
		return nil
	}
	b, err := json.Marshal(roles)
	if err != nil {
		return nil // a []string always marshals
	}
	s := string(b)
	return &s
}

// rolesOf reads the authenticated_roles column back. A value that is not a
// JSON list of strings (written by hand, or by a tool that knows no better)
// reads as no roles rather than failing the whole status or run: a workflow
// that requires a role is then refused by its binding, which is the safe
// side.
func rolesOf(column *string) []string {
	if column == nil || *column == "" {
		return nil
	}
	var roles []string
	if err := json.Unmarshal([]byte(*column), &roles); err != nil {
		return nil
	}
	return roles
}
