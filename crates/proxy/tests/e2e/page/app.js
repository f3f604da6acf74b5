// Generated from src/components/UserList.tsx: do not edit.
(function () {
    "use strict";

    var bundledAt = "fixture";

    function findUser(id) {
        return id === "ada" ? { name: "Ada", foo: "bar" } : null;
    }

    function mountUserList(root) {
        root.textContent = "rendered";
        console.error("widget failed", { widget: "UserList", retries: 3 });
        Promise.reject(new Error("load failed"));
        fetch("/api/users").then((res) => res.json());
        setTimeout(function renderUserList() {
            const user = findUser("grace");
            return user.foo;
        }, 0);
    }

    mountUserList(document.getElementById("app"));
})();
//# sourceMappingURL=app.js.map
