// A component with a bug: a missing user has no name.
export interface User {
  name: string;
}

export interface Props {
  users: (User | null)[];
}

export function UserList(props: Props): string {
  const users: (User | null)[] = props.users;
  return users.map((u: User | null) => u!.name).join(", ");
}
