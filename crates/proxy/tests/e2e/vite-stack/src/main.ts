import { createRoot } from "mini-react";
import { UserList } from "./UserList";

const root = createRoot(document.getElementById("app")!);
const props = { users: [{ name: "Ada" }, null] };
root.render(UserList, props);

fetch("/api/users")
  .then((res: Response) => res.json())
  .catch(() => {});

// A new UserList (an edit) renders again, where Vite's client imports it with ?t=.
if (import.meta.hot) {
  import.meta.hot.accept("./UserList", (module) => {
    if (module) root.render(module.UserList, props);
  });
}
