// The original of app.js: what the page's developer wrote. app.js is this with the types
// stripped, one generated line for each line from `function findUser` on, inside the
// bundler's wrapper; app.js.map (built by the test) maps the one to the other.
type User = { name: string; foo: string };

function findUser(id: string): User | null {
  return id === "ada" ? { name: "Ada", foo: "bar" } : null;
}

export function mountUserList(root: HTMLElement): void {
  root.textContent = "rendered";
  console.error("widget failed", { widget: "UserList", retries: 3 });
  Promise.reject(new Error("load failed"));
  fetch("/api/users").then((res: Response) => res.json());
  setTimeout(function renderUserList() {
    const user = findUser("grace");
    return (user as User).foo;
  }, 0);
}
